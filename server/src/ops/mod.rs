//! Running the service in production: the metrics listener and what it exposes
//! (`exporter`). What is measured, and under which names, is `crate::obs`; this module installs
//! the recorder and sets the gauges at each scrape (the per-request metrics and access log are
//! the shared path's, `crate::http::observe`).

pub mod exporter;

pub use exporter::{Exporter, LogFormat};

use std::sync::OnceLock;

/// The process's log format, set once by `main` before anything logs.
static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// Records the log format `announce` writes in (the first call wins).
pub fn set_log_format(format: LogFormat) {
    let _ = FORMAT.set(format);
}

/// Writes a line operators and tests wait for (listening, metrics address) to standard error,
/// whatever the log level: plain text, or in JSON mode one object like the log lines, so a
/// collector parsing every line as JSON never meets a line it cannot read.
pub fn announce(message: &str) {
    match FORMAT.get().copied().unwrap_or_default() {
        LogFormat::Text => eprintln!("{message}"),
        LogFormat::Json => {
            let line = serde_json::json!({
                "timestamp": asof_engine::Instant::now().to_string(),
                "level": "INFO",
                "target": "asof",
                "message": message,
            });
            eprintln!("{line}");
        }
    }
}
