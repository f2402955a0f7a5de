//! Subcommands and flags of `asof` (every flag has an `ASOF_*` environment equivalent): the
//! command line in `args.rs`, each subcommand in a file of its own, the dispatch here.

use std::process::ExitCode;

use asof_engine::{Corpus, CorpusStore};

pub use args::Cli;
use args::{Command, DeltaCommand, KeysCommand};
use corpus::{bench_corpus, build_sample, delta_backfill, verify};
use ingest::ingest;
use keys::keys_create;
use query::query;
use serve::serve;

mod args;
mod audit;
mod corpus;
mod files;
mod flags;
mod ingest;
mod keys;
mod poll;
mod query;
mod serve;
mod sql;

/// Exit code when the answer is a coverage hole (409 over HTTP): not an error, not an answer.
const EXIT_HOLE: u8 = 3;

pub async fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Query(a) => query(a).await,
        Command::Sql(a) => sql::run(a).await,
        Command::Verify(a) => verify(a).await,
        Command::BuildSample(a) => build_sample(a).await,
        Command::BenchCorpus(a) => bench_corpus(a).await,
        Command::Ingest(a) => ingest(a).await,
        Command::Files(a) => files::files(a).await,
        Command::Poll(a) => poll::poll(a).await,
        Command::Serve(a) => serve(*a).await,
        Command::Keys(KeysCommand::Create(a)) => keys_create(a).await,
        Command::Delta(DeltaCommand::Backfill(a)) => delta_backfill(a).await,
        Command::Audit(c) => audit::audit(c).await,
    };
    match result {
        Ok(code) => code,
        // `asof query ... | head`: the reader left; there is nobody to tell.
        Err(e) if is_broken_pipe(e.as_ref()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

pub(crate) type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// Whether an error comes from a full disk (`ENOSPC`) anywhere down its chain of causes.
fn disk_full(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && (io.kind() == std::io::ErrorKind::StorageFull || io.raw_os_error() == Some(28))
        {
            return true;
        }
        next = e.source();
    }
    false
}

/// Whether writing the output failed because its reader closed the pipe (through the
/// writers' own error types: JSON, CSV and Arrow wrap the `io::Error`).
fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        let kind = if let Some(io) = e.downcast_ref::<std::io::Error>() {
            Some(io.kind())
        } else if let Some(j) = e.downcast_ref::<serde_json::Error>() {
            j.io_error_kind()
        } else if let Some(c) = e.downcast_ref::<csv::Error>() {
            match c.kind() {
                csv::ErrorKind::Io(io) => Some(io.kind()),
                _ => None,
            }
        } else if let Some(arrow::error::ArrowError::IoError(_, io)) =
            e.downcast_ref::<arrow::error::ArrowError>()
        {
            Some(io.kind())
        } else {
            None
        };
        if kind == Some(std::io::ErrorKind::BrokenPipe) {
            return true;
        }
        cur = e.source();
    }
    false
}

pub(crate) async fn open(corpus: &str) -> Result<Corpus, asof_engine::Error> {
    Corpus::open(CorpusStore::open(corpus)?).await
}

#[cfg(test)]
mod tests {
    use super::flags::default_corpus;
    use super::serve::interval_seconds;
    use super::*;
    use clap::Parser;

    #[test]
    fn serve_defaults_to_loopback_8080_the_shipped_corpus_and_a_local_sqlite_file() {
        // The defaults only: an operator's ASOF_* variables would override them, so the
        // checks run in a child of this test binary without any of them, whatever this
        // environment sets.
        if std::env::var_os("SERVE_DEFAULTS_CHILD").is_none() {
            let name = concat!(
                "cli::tests::",
                "serve_defaults_to_loopback_8080_the_shipped_corpus_and_a_local_sqlite_file"
            );
            let mut child = std::process::Command::new(std::env::current_exe().unwrap());
            child.args(["--exact", name, "--test-threads=1"]);
            for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("ASOF_")) {
                child.env_remove(k);
            }
            let out = child.env("SERVE_DEFAULTS_CHILD", "1").output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains("1 passed"),
                "{stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let Command::Serve(a) = Cli::try_parse_from(["asof", "serve"]).unwrap().command else {
            panic!("serve parses as serve");
        };
        assert_eq!(a.listen, "127.0.0.1:8080");
        assert_eq!(a.database_url.expose(), "sqlite://.asof-state/asof.db");
        assert_eq!(a.corpus.corpus, default_corpus());
        assert!(
            std::path::Path::new(&a.corpus.corpus)
                .join("manifests/CURRENT")
                .is_file(),
            "the default corpus is the shipped sample"
        );
        assert_eq!(a.reload_interval, std::time::Duration::from_secs(1));
        assert_eq!(a.max_streams_per_user, 4);
        assert_eq!(a.max_streams, None);
        assert_eq!(a.public_rate_limit, 120);
        assert_eq!(a.request_timeout, 30);
        assert_eq!(a.max_scans, 8);
        assert_eq!(a.scan_wait_ms, 2000);
        assert_eq!(a.scan_cpu_share, 0.25);
        assert!(a.trusted_proxies.is_empty());
        assert!(Cli::try_parse_from(["asof", "serve", "--public-rate-limit", "0"]).is_err());
        for bad in ["0", "-0.5", "1.5", "NaN", "half"] {
            assert!(
                Cli::try_parse_from(["asof", "serve", "--scan-cpu-share", bad]).is_err(),
                "--scan-cpu-share {bad} is refused"
            );
        }
    }

    #[test]
    fn the_reload_interval_takes_decimal_seconds_from_a_tenth_up() {
        assert_eq!(
            interval_seconds("0.25"),
            Ok(std::time::Duration::from_millis(250))
        );
        assert_eq!(interval_seconds("2"), Ok(std::time::Duration::from_secs(2)));
        for bad in ["0.05", "0", "-1", "1e9", "soon", ""] {
            assert!(interval_seconds(bad).is_err(), "{bad}");
        }
    }
}
