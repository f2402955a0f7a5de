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
    asof_server::ops::set_log_format(args.log_format);
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("ASOF_LOG").unwrap_or_else(|_| "warn".into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        asof_server::ops::LogFormat::Text => logs
            // Colour codes only on a terminal: a log file or collector gets plain lines.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        // One object per line; the event's fields at the top level beside `timestamp`,
        // `level` and `target`, and the request's span (its `request_id`) under `span`.
        asof_server::ops::LogFormat::Json => {
            logs.json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(false)
                .init();
            // A panic is a log line too, in the same format, so a collector reading JSON
            // never meets the default hook's plain text.
            std::panic::set_hook(Box::new(|info| {
                let thread = std::thread::current();
                tracing::error!(
                    target: "asof::panic",
                    thread = thread.name().unwrap_or("unnamed"),
                    location = info.location().map(ToString::to_string),
                    "panic: {}",
                    info.payload()
                        .downcast_ref::<&str>()
                        .copied()
                        .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
                        .unwrap_or("(no message)")
                );
            }));
        }
    }
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
