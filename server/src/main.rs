//! The `asof` binary: one entry point for the service and the offline tools.

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc, not glibc's malloc: a page of rows is hundreds of small allocations made and freed
/// on several threads, and glibc's malloc, free and consolidation were a sixth of the server's
/// CPU on the hot path (BENCHMARKS.md, "The hot path against `/health`").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ASOF_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: a log file or collector gets plain lines.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(cli::run(args))
}
