//! Derived access files: CIK-clustered compactions of each source-lane-era (eight years),
//! their sidecar indexes, and the index-driven read path that answers by-CIK queries from them.
//!
//! Why: a source-day partition is the unit of coverage, immutability and delivery, but a
//! by-CIK query over thousands of daily files touches every file (each costs ~0.5 ms even when
//! pruned). An access file holds one era ([`GROUP_YEARS`] years, [`era_of`]) of one
//! source-lane sorted by
//! `(cik, published_at nulls last, id, committed_at, revision_id)` in blocks of 128 rows, each
//! block one zstd-compressed Arrow record batch whose columns lie next to each other
//! ([`blocks`]); its sidecar lists, per CIK, the row range, the number of rows without
//! `published_at` and a fence (the `published_at` of the first row) every 128 dated rows, and
//! the byte offset of every block. A query reads only the blocks that can hold its page of
//! rows, and consecutive blocks are one byte range: a cold page from object storage is one
//! range GET of a few kilobytes, not a range per column.
//!
//! The sidecars are read once per version at load (in parallel; the data files' own footers
//! never). Decoded rows are kept in [`crate::read::page_cache::ROWS`] by their part of each block
//! (a CIK's run, or the piece of it a page reads), not as whole blocks: a small filer's run is
//! a few rows of a block shared with other filers. Compressed blocks from a remote store are
//! kept in [`crate::read::page_cache::REMOTE`]: the unit cached there is the unit read.
//!
//! Why blocks and not Parquet: a Parquet row group stores each column apart, so a page of a
//! hundred rows was twenty scattered ranges and, from S3, megabytes of column chunks. The data
//! file ([`blocks`]) is an Arrow IPC file of 128-row record batches, each column buffer
//! zstd-compressed, without the columns its path fixes (`source_id`, `lane`, restored when a
//! block is decoded); compressed per block, the files are smaller than the partitions they
//! are derived from (`engine/tests/s3_publish.rs` counts a cold page's GETs).
//!
//! Why eras and not years: a filer's rows are spread over the years it filed, and a cold page
//! reads one range per file holding its rows. With a file a year, a small filer of a 20M-row
//! corpus over 22 years cost up to 18 range GETs and a busy filer's next hundred rows four
//! (BENCHMARKS.md); with a file an era, at most one per era the rows span (three or four over
//! two decades), while a daily ingest still writes only a delta file of its rows.
//!
//! Reading (`crate::store::objects::access`): [`AccessIndex`] loads only the sidecars at open, sixteen at a time (a
//! replica starts from a bucket in a few round trips; a reload reads only the sidecars it does
//! not hold), never a data file's footer, and merges a CIK's runs whose spans overlap (a base
//! and its deltas). From object storage a page first reads what it will need of every yearly
//! run at once: one round trip, however many eras a filer's rows span. Keeping whole blocks
//! in the row cache made a small filer's page (one run a year) hold thousands of rows, and the
//! cache thrashed at 20M rows (BENCHMARKS.md); by run, a hot filer's first page decodes
//! nothing, and its rows are handed out shared with the cache (`record::SharedRow`, via
//! `Corpus::news_shared`), never copied. The news routes encode a keyed record once per cached
//! row and keep the bytes beside it (`SharedRow::json`, counted in the cache's bound), so a hot
//! page is copied out, not encoded again. A record lookup reads only the blocks of the CIK's
//! runs on the days the id runs name.
//!
//! Writing (`crate::write::access`): access files are derived at publish time from the partitions of
//! their year and listed, hash-checked, in the manifest's `access` list. A later publish that
//! adds rows to a year writes them as a small delta file (`delta-<sha>`, same layout, with its
//! sidecar) next to the year's base instead of deriving the year again, so a daily ingest
//! costs its own rows, not the era's; the era is derived whole again when its deltas reach a
//! quarter of its base ([`update`]). A derive reads the era's partitions once and holds at
//! most about 131k rows in memory: an external merge sort ([`GroupBuilder`]) spills sorted runs
//! to a temporary file and merges them into the file, with the bytes of a sort of all rows.
//!
//! Access files are never authoritative: the DataFusion scan over partitions answers the same
//! queries, and a differential test holds the two to the same answers. Files of earlier
//! layouts (`access.cik_clustered/1`, Parquet; `access.cik_blocks/2`, a file a year) are
//! ignored: until the next publish derives every group again, their lanes are answered by the
//! walk.

pub(crate) mod blocks;
pub(crate) mod layout;

pub use layout::{
    BLOCK_ROWS, DELTA_PREFIX, DELTA_RATIO, GROUP_YEARS, KIND_CLUSTERED, KIND_SIDECAR, MAX_DELTAS,
    era_of, group_dir, group_of, group_of_day,
};
pub(crate) use layout::{Bounds, names_data, verify_file};
