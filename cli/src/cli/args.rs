//! The command line: `asof`'s subcommands and the flags they share (every flag has an
//! `ASOF_*` environment equivalent); each subcommand's own flags are in its file.

use clap::{Parser, Subcommand};

use super::corpus::{BenchCorpusArgs, BuildSampleArgs};
use super::flags::CorpusArg;
use super::ingest::IngestArgs;
use super::keys::KeysCreateArgs;
use super::query::QueryArgs;
use super::serve::ServeArgs;
use super::sql::SqlArgs;
use super::{files, poll};

#[derive(Debug, Parser)]
#[command(
    name = "asof",
    version,
    about = "What was knowable then: an as-of information service over public records"
)]
pub struct Cli {
    /// How log lines (on standard error) are written: `text` for people, `json` for a log
    /// collector (one object per line). ASOF_LOG sets the level, e.g. info.
    #[arg(
        long = "log-format",
        env = "ASOF_LOG_FORMAT",
        global = true,
        value_enum,
        default_value_t
    )]
    pub log_format: asof_server::ops::LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Answer an as-of query (or a diff with --since) from a corpus on disk.
    Query(QueryArgs),
    /// Run read-only SQL over a corpus's partitions (tables: news, partitions).
    Sql(SqlArgs),
    /// Re-hash every object of the current version against its manifest.
    Verify(CorpusArg),
    /// Rebuild the shipped sample corpus from its raw files (a chain of ordinary ingests, the
    /// last version published alone into an empty --out); prints the corpus_version last.
    BuildSample(BuildSampleArgs),
    /// Ingest agency files of one source as one new corpus version (all or nothing); prints the
    /// corpus_version last.
    Ingest(IngestArgs),
    /// Keep the live lane current: poll EDGAR's current-filings feed and publish each filing
    /// not yet held (forward_first_seen, available_at = the fetch minute).
    Poll(poll::PollArgs),
    /// Write a synthetic EDGAR-like corpus for benchmarks (deterministic by seed); prints the
    /// corpus_version last.
    BenchCorpus(BenchCorpusArgs),
    /// List a corpus's Parquet partitions as files, or download them verified
    /// (`asof files download --out DIR`).
    Files(files::FilesArgs),
    /// Run the HTTP service.
    // Boxed: its many settings would make every other command as large.
    Serve(Box<ServeArgs>),
    /// Manage API keys (operators and tests).
    #[command(subcommand)]
    Keys(KeysCommand),
    /// The Delta Lake tables beside the partitions (one per source and lane).
    #[command(subcommand)]
    Delta(DeltaCommand),
    /// Decision audit receipts: `replay` asks a receipt's request again, pinned to its
    /// corpus_version, and proves the same answer (docs/audit.md).
    #[command(subcommand)]
    Audit(super::audit::AuditCommand),
}

#[derive(Debug, Subcommand)]
pub enum DeltaCommand {
    /// Write the Delta commits the corpus lacks, replaying its manifest chain oldest first
    /// (a corpus published before the tables existed, or a publisher stopped between its
    /// pointer and its log). Idempotent; prints what it wrote.
    Backfill(CorpusArg),
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key (and the user if needed); prints the raw key as the last line.
    Create(KeysCreateArgs),
}
