//! Flags several subcommands share: the corpus to read and the output format.

use clap::{Args, ValueEnum};

/// The shipped sample corpus: the repository root (manifests/ and snapshots/).
pub(crate) fn default_corpus() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/..").to_owned()
}

#[derive(Debug, Args)]
pub struct CorpusArg {
    /// Corpus location: a directory or an object-store URL (s3://, gs://, az://, file://).
    #[arg(long, global = true, env = "ASOF_CORPUS", default_value_t = default_corpus())]
    pub corpus: String,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Json,
    Csv,
    Table,
}
